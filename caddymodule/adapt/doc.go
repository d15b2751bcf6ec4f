// Package adapt is the Caddyfile adapter of edgelimit's modules: the
// rate_limit directive (directive.go, with caddy-ratelimit's zone syntax
// in compat.go) and the rate_limit global option (global.go), adapted to
// the JSON of caddymodule.Handler and caddymodule.App. A rule's own
// subdirectives are package rulesyntax's, which the rules file shares;
// every check of a value is the one a config load makes (ruleconfig's and
// appconfig's, or caddymodule's through RuleChecks and MissingFor), with
// the Caddyfile line attached here.
package adapt
