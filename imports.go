// Package edgelimit registers the edgelimit Caddy modules: build Caddy with
// `xcaddy build --with github.com/edgebyte/edgelimit`.
package edgelimit

import (
	// the rate_limit handler and app
	_ "github.com/edgebyte/edgelimit/caddymodule"
	// the Caddyfile's rate_limit directive and global option
	_ "github.com/edgebyte/edgelimit/caddymodule/adapt"
	// the admin API, the dashboard and the rate_limit_ui handler
	_ "github.com/edgebyte/edgelimit/caddymodule/admin"
	// the caddy rate-limit replay command
	_ "github.com/edgebyte/edgelimit/caddymodule/replay"
)
