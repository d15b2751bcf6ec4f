// Package layout holds no code, only the tests of the repository's shape:
// the rules of the house that the go command can check.
//
// The six libraries — limiter, geo, gossip, redisstore, jwtkey and topkeys,
// with their subpackages — never depend on Caddy, neither in what they
// build with nor in what their tests build with: a program that is not a
// Caddy plugin can use them, and caddymodule is their only adapter to
// Caddy (layout_test.go).
//
// The tests live here rather than beside imports.go at the root because the
// root package imports every Caddy module: its test binary would link all
// of Caddy to run one `go list`.
package layout
