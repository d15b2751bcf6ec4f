// Command caddy is Caddy with its standard modules and the edgelimit plugin,
// for `go run ./cmd/caddy run --config …`.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/edgebyte/edgelimit"
)

func main() {
	caddycmd.Main()
}
