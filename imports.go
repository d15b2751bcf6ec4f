// Package edgelimit registers the edgelimit Caddy modules: build Caddy with
// `xcaddy build --with github.com/edgebyte/edgelimit`.
package edgelimit

import (
	// the rate_limit handler, app and admin API
	_ "github.com/edgebyte/edgelimit/caddymodule"
)
