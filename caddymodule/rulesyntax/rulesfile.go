package rulesyntax

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"gopkg.in/yaml.v3"
)

// The EdgeByte YAML rules format (rules_file):
//
//	rate_limit:
//	  - path: /api/v1/*
//	    limit: 100
//	    window: 1m
//	    by: user_id
//	    burst: 20
//
// Each entry is a rule. Its fields are the Caddyfile subdirectives, each
// read by the same code as in a Caddyfile (the YAML values become the
// subdirective's arguments, at the field's line), plus path (Caddy's path
// matcher: one pattern or a list) and window (with a whole-number limit).

// maxRulesFileBytes bounds the size of a rules file.
const maxRulesFileBytes = 4 << 20

// LoadRulesFile reads the rules of a rules file. Rules without a name are
// named "<prefix> <path> by <key>".
func LoadRulesFile(path, namePrefix string, checks Checks) ([]ruleconfig.Rule, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rules_file: %v", err)
	}
	if fi.Size() > maxRulesFileBytes {
		return nil, fmt.Errorf("rules_file %s: %d bytes, more than the %d a rules file may have", path, fi.Size(), maxRulesFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules_file: %v", err)
	}
	return ParseRulesFile(data, path, namePrefix, checks)
}

// ParseRulesFile reads the rules of a rules file's text. Errors name the
// file and line: "…, at rules.yaml:7".
func ParseRulesFile(data []byte, file, namePrefix string, checks Checks) ([]ruleconfig.Rule, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("rules_file %s: %v", file, err)
	}
	at := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf(format+", at %s:%d", append(args, file, n.Line)...)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("rules_file %s: empty; want a rate_limit: list of rules", file)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, at(root, "want a mapping with a rate_limit: list of rules")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, value := root.Content[i], root.Content[i+1]
		if key.Value != "rate_limit" {
			return nil, at(key, "unknown field %q: the file holds a rate_limit: list of rules", key.Value)
		}
		if list != nil {
			return nil, at(key, "rate_limit given twice")
		}
		list = value
	}
	if list == nil || list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		n := root
		if list != nil {
			n = list
		}
		return nil, at(n, "rate_limit: want a list of rules")
	}
	p := &Namer{Site: namePrefix}
	var rules []ruleconfig.Rule
	seen := make(map[string]int)
	for _, entry := range list.Content {
		r, err := parseRuleEntry(entry, file, p, checks)
		if err != nil {
			return nil, err
		}
		if line, dup := seen[r.Name]; dup {
			return nil, at(entry, "rule %q is defined twice in this file (first at line %d)", r.Name, line)
		}
		seen[r.Name] = entry.Line
		rules = append(rules, r)
	}
	return rules, nil
}

// yamlOnlyFields are the fields of an entry that are not Caddyfile
// subdirectives.
var yamlOnlyFields = map[string]bool{"path": true, "window": true, "tiers": true}

// parseRuleEntry reads one entry of the list.
func parseRuleEntry(entry *yaml.Node, file string, p *Namer, checks Checks) (ruleconfig.Rule, error) {
	tok := func(n *yaml.Node, text string) caddyfile.Token {
		return caddyfile.Token{File: file, Line: n.Line, Text: text}
	}
	if entry.Kind != yaml.MappingNode {
		return ruleconfig.Rule{}, ErrAt(tok(entry, ""), "a rule is a mapping of fields (path:, limit:, window:, by: …)")
	}
	spec := NewSpec(tok(entry, "-"), checks)
	fields := make(map[string]*yaml.Node)
	var order []string
	for i := 0; i+1 < len(entry.Content); i += 2 {
		key, value := entry.Content[i], entry.Content[i+1]
		name := key.Value
		_, sub := inheritedFields[name]
		switch {
		case name == "match", name == "rule", name == "rules_file":
			return ruleconfig.Rule{}, ErrAt(tok(key, name), "%s cannot be in a rules file entry (use path:)", name)
		case !sub && !yamlOnlyFields[name] && name != "name":
			return ruleconfig.Rule{}, ErrAt(tok(key, name), "unknown field %q", name)
		case fields[name] != nil:
			return ruleconfig.Rule{}, ErrAt(tok(key, name), "field %s given twice", name)
		}
		fields[name], order = value, append(order, name)
	}
	if w := fields["window"]; w != nil && (fields["limit"] == nil || fields["limit"].Kind != yaml.ScalarNode || strings.Contains(fields["limit"].Value, " ")) {
		return ruleconfig.Rule{}, ErrAt(tok(w, "window"), "window goes with a whole-number limit (limit: 100, window: 1m)")
	}
	for _, name := range order {
		value := fields[name]
		var err error
		switch name {
		case "path", "window":
			continue
		case "limit":
			err = parseYAMLLimit(spec, value, fields["window"], tok)
		case "tiers":
			err = parseYAMLTiers(spec, value, tok)
		default:
			err = parseYAMLField(spec, name, value, tok)
		}
		if err != nil {
			return ruleconfig.Rule{}, err
		}
	}
	if paths := fields["path"]; paths != nil {
		list, err := scalars(paths)
		if err != nil || len(list) == 0 || slices.Contains(list, "") {
			return ruleconfig.Rule{}, ErrAt(tok(paths, "path"), "path: want a path pattern (/api/*) or a list of them")
		}
		raw, _ := json.Marshal(list)
		spec.Rule.MatcherSetsRaw = []caddy.ModuleMap{{"path": raw}}
		p.Matcher = strings.Join(list, ",")
	} else {
		p.Matcher = ""
	}
	if spec.Rule.Name == "" {
		spec.Rule.Name = p.Derive(spec.Rule.By)
	}
	if err := spec.Finish(); err != nil {
		return ruleconfig.Rule{}, err
	}
	return spec.Rule, nil
}

// parseYAMLLimit reads limit: as one limit (limit: 100 with window: 1m,
// or limit: "100 1m") or several (limit: ["20 1s", "10000 1d"]).
func parseYAMLLimit(spec *Spec, limit, window *yaml.Node, tok func(*yaml.Node, string) caddyfile.Token) error {
	var lines [][]string
	switch {
	case window != nil:
		if window.Kind != yaml.ScalarNode {
			return ErrAt(tok(window, "window"), "window: want a duration such as 1m")
		}
		lines = [][]string{{limit.Value, window.Value}}
	case limit.Kind == yaml.ScalarNode:
		if !strings.Contains(limit.Value, " ") {
			return ErrAt(tok(limit, "limit"), "limit %s: give its window, as window: 1m, or write limit: \"%s 1m\"", limit.Value, limit.Value)
		}
		lines = [][]string{strings.Fields(limit.Value)}
	case limit.Kind == yaml.SequenceNode:
		items, err := scalars(limit)
		if err != nil {
			return ErrAt(tok(limit, "limit"), "limit: want \"COUNT WINDOW\" items, as [\"20 1s\", \"10000 1d\"]")
		}
		for _, item := range items {
			lines = append(lines, strings.Fields(item))
		}
	default:
		return ErrAt(tok(limit, "limit"), "limit: want a count with window:, \"COUNT WINDOW\", or a list of those")
	}
	for _, args := range lines {
		if err := parseTokens(spec, "limit", args, limit, tok); err != nil {
			return err
		}
	}
	return nil
}

// parseYAMLTiers reads tiers: a mapping of tier names to their limits, a
// "COUNT/WINDOW" or a list of them: {free: 100/1m, pro: 1000/1m}.
func parseYAMLTiers(spec *Spec, tiers *yaml.Node, tok func(*yaml.Node, string) caddyfile.Token) error {
	if tiers.Kind != yaml.MappingNode || len(tiers.Content) == 0 {
		return ErrAt(tok(tiers, "tiers"), "tiers: want tier names with their limits, as {free: 100/1m, pro: 1000/1m}")
	}
	for i := 0; i+1 < len(tiers.Content); i += 2 {
		name, limits := tiers.Content[i], tiers.Content[i+1]
		specs, err := scalars(limits)
		if err != nil || name.Kind != yaml.ScalarNode {
			return ErrAt(tok(name, "tiers"), "tiers: %s: want COUNT/WINDOW or a list of them", name.Value)
		}
		if err := parseTokens(spec, "tier", append([]string{name.Value}, specs...), name, tok); err != nil {
			return err
		}
	}
	return nil
}

// parseYAMLField reads a field as its Caddyfile subdirective: a scalar or
// a list gives the arguments (a scalar of several words, several: by:
// header X-API-Key), a mapping its keys and values in order
// (geo_multiplier: {RU: 1.5}), a boolean flag is the subdirective when
// true.
func parseYAMLField(spec *Spec, name string, value *yaml.Node, tok func(*yaml.Node, string) caddyfile.Token) error {
	var args []string
	switch value.Kind {
	case yaml.ScalarNode:
		if flagFields[name] && value.ShortTag() != "!!bool" {
			return ErrAt(tok(value, name), "%s: want true or false", name)
		}
		if value.ShortTag() == "!!bool" {
			var on bool
			if err := value.Decode(&on); err != nil {
				return ErrAt(tok(value, name), "%s: %v", name, err)
			}
			if !on {
				return nil
			}
			break
		}
		if value.ShortTag() == "!!null" {
			return ErrAt(tok(value, name), "%s: no value", name)
		}
		args = strings.Fields(value.Value)
		if name == "name" || len(args) == 0 {
			args = []string{value.Value}
		}
	case yaml.SequenceNode:
		items, err := scalars(value)
		if err != nil {
			return ErrAt(tok(value, name), "%s: want a list of values", name)
		}
		for _, item := range items {
			args = append(args, strings.Fields(item)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(value.Content); i += 2 {
			k, v := value.Content[i], value.Content[i+1]
			if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode {
				return ErrAt(tok(k, name), "%s: want key: value pairs", name)
			}
			args = append(args, k.Value, v.Value)
		}
	default:
		return ErrAt(tok(value, name), "%s: unexpected value", name)
	}
	return parseTokens(spec, name, args, value, tok)
}

// parseTokens runs the Caddyfile subdirective name with args, as if they
// were written on the line of n.
func parseTokens(spec *Spec, name string, args []string, n *yaml.Node, tok func(*yaml.Node, string) caddyfile.Token) error {
	tokens := []caddyfile.Token{tok(n, name)}
	for _, a := range args {
		if a == "{" || a == "}" {
			return ErrAt(tok(n, name), "%s: a value cannot be a lone brace", name)
		}
		tokens = append(tokens, tok(n, a))
	}
	d := caddyfile.NewDispenser(tokens)
	d.Next()
	if err := spec.ParseAs(d, name); err != nil {
		return err
	}
	if d.NextArg() {
		return d.Errf("%s: unexpected value %q", name, d.Val())
	}
	return nil
}

// scalars are the values of a scalar or a list of scalars.
func scalars(n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return []string{n.Value}, nil
	case yaml.SequenceNode:
		var out []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return nil, errors.New("not a list of values")
			}
			out = append(out, c.Value)
		}
		return out, nil
	}
	return nil, errors.New("not a value or a list of values")
}

// flagFields are the subdirectives that take no argument: true or false
// in YAML.
var flagFields = map[string]bool{"shadow": true, "problem_json": true, "log_key": true}
