// Command caddy-ratelimit is Caddy with its standard modules and
// github.com/mholt/caddy-ratelimit, the peer most Caddy operators would
// pick instead.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/mholt/caddy-ratelimit"
)

func main() {
	caddycmd.Main()
}
