// Command caddy-edgelimit is Caddy with its standard modules and the
// edgelimit plugin, built from this module so that its dependencies are
// the same as the other two binaries'.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/edgebyte/edgelimit"
)

func main() {
	caddycmd.Main()
}
