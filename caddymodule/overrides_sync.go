package caddymodule

import "github.com/edgebyte/edgelimit/limiter"

// shareOverride tells the rule's other holders of state of a change of an
// override made here.
func (r RuleState) shareOverride(o limiter.Override) {}
