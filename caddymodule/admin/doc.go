// Package admin is edgelimit's view of the running config for operators:
// module admin.api.rate_limit, the routes under /rate_limit/ on Caddy's
// admin endpoint (the rules in force, a key's state, resets, blocked
// keys, the cluster), the dashboard it serves at /rate_limit/ui/ (the
// embedded dashboard/ folder), and module http.handlers.rate_limit_ui
// (directive rate_limit_ui), which serves the same page and API on a
// site's route, behind the site's own authentication.
//
// It reads and changes the rules through package caddymodule's RuleState
// (the rules in force, by name) and nothing else of that package's state.
//
//   - routes.go: the module, its routing, the top keys, a key, a reset.
//   - views.go: the JSON the routes answer; blocks.go, concurrency.go,
//     store.go and cluster.go: a view's parts for block_for,
//     max_concurrent, store redis and the cluster.
//   - dashboard.go: the embedded page; ui.go: the rate_limit_ui handler.
package admin
