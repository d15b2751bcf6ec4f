// Command caddy-plain is Caddy with its standard modules and no rate
// limiter: the ceiling the benchmark compares the limiters against.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() {
	caddycmd.Main()
}
