package caddymodule

// A request's tier (tier_by) and the factor it gives the rule's limits;
// what tiers are is in package ruleconfig.

// tierScale is the factor the request's tier gives the rule's limits: 1
// without tiers, without a tier, or for a tier not listed.
func (ru *rule) tierScale(q *request) float64 {
	if ru.tiers == nil {
		return 1
	}
	name := ru.tierSource.value(q)
	if f, ok := ru.tiers[name]; ok {
		return f
	}
	return 1
}
