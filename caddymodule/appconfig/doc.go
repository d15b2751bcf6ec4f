// Package appconfig is the rate_limit app's configuration blocks as
// configured (the global option's jwt, cluster and store redis blocks):
// their JSON fields and defaults, and each block's checks and parsing
// into the settings that internal/clusternode and internal/redispool run
// with. Package caddymodule's App holds them; the Caddyfile adapter
// (package adapt) writes them, with the same checks.
package appconfig
