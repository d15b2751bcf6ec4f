// Package ruleconfig is a rate_limit rule as configured: Rule, its JSON
// fields and their defaults, and the checks of each field alone and
// together, in the words a config error shows. It is what the JSON config,
// the Caddyfile adapter and the EdgeByte rules file (package
// caddymodule/rulesyntax) all produce, and what package caddymodule
// provisions into a rule that decides requests.
//
// The checks here need nothing but the rule. What needs more (compiling
// key sources and matchers, what a rule needs of the rate_limit app) is
// package caddymodule's.
//
// Tiers: a rule's limits chosen by a request's tier (tier_by, such as the
// plan claim of its token), among named alternatives (tier NAME
// COUNT/WINDOW…). A tier gives one COUNT/WINDOW per limit of the rule, with
// the rule's windows, and scales them all by one factor: a key's state is
// the same in every tier, so a client whose tier changes keeps its counters
// and meets its new limits at once. A request with no tier, or a tier not
// listed, gets the rule's own limits.
package ruleconfig
