package adapt

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/caddymodule/rulesyntax"
)

func init() {
	// parseDirective does what RegisterHandlerDirective's wrapper does, and
	// also keeps the matcher token for derived rule names.
	httpcaddyfile.RegisterDirective("rate_limit", parseDirective)
	httpcaddyfile.RegisterDirectiveOrder("rate_limit", httpcaddyfile.Before, "basic_auth")
}

// parseDirective sets up the rate_limit handler from a Caddyfile segment:
//
//	rate_limit [<matcher>] {
//	    name            <name>
//	    limit           <count> <window>       # repeatable: all must pass; window a duration or day|week|month|year
//	    algorithm       sliding_window|fixed_window|sliding_log|token_bucket|leaky_bucket
//	    timezone        <IANA name>            # calendar limits only: where their days begin; default UTC
//	    burst           <count>
//	    max_delay       <duration>             # leaky_bucket only
//	    max_held        <count>                # leaky_bucket only: requests held at once
//	    max_concurrent  <count>                # requests of a key in flight at once; with limits or alone
//	    lease_timeout   <duration>             # max_concurrent with store redis: a lease's life; default 1m
//	    by              <source...>            # repeatable; ip | ip/V4[/V6] | asn | user_id | header <name> | query <name> | cookie <name> | jwt <claim> | static <text> | {placeholder}
//	    on_missing_key  skip|ip|deny
//	    cost            <count>|<placeholder>
//	    cost_header     <header>               # the response says the units it took; not leaky_bucket
//	    count_status    <code|class...>        # 401 4xx: only these responses take units; not leaky_bucket
//	    block_for       <duration...>          # a key denied is then refused that long; later offences the next
//	    block_reset     <duration>             # with block_for: how long offences are remembered; default 24h
//	    shadow
//	    exempt          <cidr...>              # repeatable
//	    headers         ietf|legacy|both|off
//	    retry_jitter    <fraction>
//	    max_keys        <count>
//	    max_overrides   <count>                # per-key overrides set at runtime (admin API); default 10000
//	    ipv4_prefix     <bits>                 # an IP address in the key is shortened
//	    ipv6_prefix     <bits>                 # to its network
//	    scope           cluster|node           # default cluster when the global option has a cluster
//	    geo_multiplier  <CC> <factor>... [default <factor>]
//	    asn_multiplier  <ASN> <factor>... [default <factor>]  # AS15169 or 15169
//	    tier            <name> <count>/<window>...  # repeatable
//	    tier_by         <source>
//	    key_hash        sha256
//	    problem_json
//	    log_key
//	    disable_metrics                        # the rule's series are not exported
//	    store           local|redis            # redis: the app's store redis block; default local
//	    on_store_error  local|fail_open|fail_closed  # store redis: when Redis fails; default local
//	    match           { <request matchers> }  # repeatable: any set matching is enough
//	    rules_file      <path>                 # rules in the EdgeByte YAML format, read at load
//	    rule <name> {
//	        <the subdirectives above but name and rules_file>
//	    }
//	    # mholt/caddy-ratelimit syntax (see compat.go)
//	    zone <name> { key, events, window, match, ipv4_prefix, ipv6_prefix }
//	    jitter          <fraction>
//	    sweep_interval  <duration>
//	    distributed { ... }                    # ignored, with a warning
//	    storage <module...>                    # ignored, with a warning
//	}
//
// Without rule or zone blocks, the block is one rule. With them, the
// subdirectives at the top are defaults that every rule and zone inherits
// (a rule's own value replaces the default, its own limit lines replace the
// default ones); the top makes a rule of its own only when there are zones
// and no rule blocks and the top has a limit or a name. A rule without a
// name gets one derived from the site addresses, the matcher token and the
// key, never from the limits, so a reload that changes a limit keeps the
// counters.
//
// httpcaddyfile.RegisterHandlerDirective is not used because its wrapper
// deletes the matcher token before the parser runs, and derived names need
// its text.
func parseDirective(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	if !h.Next() {
		return nil, h.ArgErr()
	}
	var matcherToken string
	if h.NextArg() {
		if t := h.Val(); t == "*" || strings.HasPrefix(t, "/") || strings.HasPrefix(t, "@") {
			matcherToken = t
		}
		h.Prev()
	}
	matcherSet, err := h.ExtractMatcherSet() // removes the matcher token and rewinds
	if err != nil {
		return nil, err
	}
	p := &blockParser{names: rulesyntax.Namer{
		Site:    strings.Join(siteAddresses(h), ","),
		Matcher: matcherToken,
		Taken:   derivedNames(h.State),
	}}
	if p.app, err = globalApp(h.Option("rate_limit")); err != nil {
		return nil, err
	}
	handler, err := p.parse(h.Dispenser)
	if err != nil {
		return nil, err
	}
	return h.NewRoute(matcherSet, handler), nil
}

// siteAddresses returns the addresses of the site block the directive is
// in, for derived rule names. httpcaddyfile.Helper does not export them, so
// they are read with reflect from its unexported field parentBlock (a
// caddyfile.ServerBlock, whose Keys are tokens). If a Caddy release renames
// that field, the names of the Caddyfiles stand in, and
// TestCaddyfileDerivedNameHasSiteAddress fails so the change is noticed.
func siteAddresses(h httpcaddyfile.Helper) []string {
	block := reflect.ValueOf(h).FieldByName("parentBlock")
	if block.IsValid() && block.Kind() == reflect.Struct {
		keys := block.FieldByName("Keys")
		if keys.IsValid() && keys.Kind() == reflect.Slice {
			var addrs []string
			for i := range keys.Len() {
				key := keys.Index(i)
				if key.Kind() != reflect.Struct {
					break
				}
				// String() reads an unexported field; Interface() would panic.
				if text := key.FieldByName("Text"); text.IsValid() && text.Kind() == reflect.String {
					addrs = append(addrs, text.String())
				}
			}
			if len(addrs) > 0 {
				return addrs
			}
		}
	}
	return h.Caddyfiles()
}

// derivedNamesKey is where, in the adaptation's shared state, the rule names
// derived so far are kept: two rate_limit blocks that would derive the same
// name (same site, matcher and key) get distinct ones, " #2" and on.
const derivedNamesKey = "rate_limit.derived_rule_names"

func derivedNames(state map[string]any) map[string]bool {
	if state == nil {
		return make(map[string]bool)
	}
	names, ok := state[derivedNamesKey].(map[string]bool)
	if !ok {
		names = make(map[string]bool)
		state[derivedNamesKey] = names
	}
	return names
}

// blockParser reads one rate_limit block.
type blockParser struct {
	names rulesyntax.Namer // the site, the directive's matcher token, the names derived so far
	app   *caddymodule.App // the global option as written, to check what rules need of it; nil: not known here
}

// globalApp is the rate_limit global option's value (an empty app if the
// Caddyfile has none).
func globalApp(option any) (*caddymodule.App, error) {
	app := new(caddymodule.App)
	if opt, ok := option.(httpcaddyfile.App); ok {
		if err := json.Unmarshal(opt.Value, app); err != nil {
			return nil, fmt.Errorf("reading the rate_limit global option: %v", err)
		}
	}
	return app, nil
}

// parse reads the block d is at (the directive's name, before Next).
func (p *blockParser) parse(d *caddyfile.Dispenser) (*caddymodule.Handler, error) {
	d.Next() // the directive's name
	top := rulesyntax.NewSpec(d.Token(), caddymodule.RuleChecks())
	if d.NextArg() {
		return nil, d.Errf("unexpected argument %q: a matcher is *, /path or @name, and rules go in the block", d.Val())
	}
	handler := new(caddymodule.Handler)
	var blocks []*rulesyntax.Spec // rule blocks and zones, in order
	var ruleBlocks int
	// the top's rule subdirectives are checked for repeats by top itself
	level := rulesyntax.NewBlock("", rulesyntax.Once("rules_file", "sweep_interval"))
	err := level.Read(d, func(sub string) error {
		switch sub {
		case "rule":
			spec, err := rulesyntax.ParseRuleBlock(d, caddymodule.RuleChecks())
			if err != nil {
				return err
			}
			blocks = append(blocks, spec)
			ruleBlocks++
		case "rules_file":
			if err := rulesyntax.OneArg(d, &handler.RulesFile); err != nil {
				return err
			}
			handler.RulesFileNames = p.names.Site
			if m := p.names.Matcher; m != "" && m != "*" {
				handler.RulesFileNames = strings.TrimSpace(p.names.Site + " " + m)
			}
		case "zone", "jitter", "sweep_interval", "distributed", "storage":
			spec, err := parseCompat(d, handler, top)
			if err != nil {
				return err
			}
			if spec != nil {
				blocks = append(blocks, spec)
			}
		default:
			return top.Parse(d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	var specs []*rulesyntax.Spec
	fileOnly := handler.RulesFile != "" && !top.Has("limit") && !top.Has("name")
	if fileOnly && len(top.Set) > 0 {
		for sub, tok := range top.Set {
			return nil, rulesyntax.ErrAt(tok, "%s beside rules_file applies to no rule: give it in the rules file, or add a limit", sub)
		}
	}
	if fileOnly {
		// the rules are the file's, and any rule blocks'
	} else if ruleBlocks == 0 && (len(blocks) == 0 || top.Has("limit") || top.Has("name")) {
		specs = append(specs, top)
	} else if tok, ok := top.Set["name"]; ok {
		return nil, rulesyntax.ErrAt(tok, "name names the rule of a block without rule blocks; name each rule with `rule NAME { … }`")
	}
	for _, b := range blocks {
		b.Inherit(top)
		specs = append(specs, b)
	}

	seen := make(map[string]bool, len(specs))
	for _, s := range specs {
		if s.Rule.Name == "" {
			s.Rule.Name = p.names.Derive(s.Rule.By)
		}
		if seen[s.Rule.Name] {
			return nil, rulesyntax.ErrAt(s.Start, "rule %q is defined twice in this block", s.Rule.Name)
		}
		seen[s.Rule.Name] = true
		if err := s.Finish(); err != nil {
			return nil, err
		}
		if p.app != nil {
			if sub, err := p.app.MissingFor(&s.Rule); err != nil {
				return nil, rulesyntax.ErrAt(s.At(sub), "rule %q: %v", s.Rule.Name, err)
			}
		}
		handler.Rules = append(handler.Rules, s.Rule)
	}
	return handler, nil
}
