// Package rulesyntax reads rate_limit rules as people write them: a
// rule's Caddyfile subdirectives (Spec: what one block sets, what it
// inherits from the top of a rate_limit block, the argument readers), the
// names derived for unnamed rules (Namer), and the EdgeByte YAML rules
// file (ParseRulesFile), whose fields go through the same subdirective
// code, so that a rule reads, defaults and fails alike in both.
//
// It produces ruleconfig.Rule values. Errors point at the line that set
// the offending value. What only provisioning can tell (a key source, the
// whole rule as it would load) is asked of the caller through Checks:
// package caddymodule, which also adapts the rate_limit directive and
// global option around these rules.
package rulesyntax
