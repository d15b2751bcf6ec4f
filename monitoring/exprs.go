package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DashboardExprs are the PromQL expressions of a Grafana dashboard's
// panels, in order, as written (with Grafana's variables).
func DashboardExprs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			exprs = append(exprs, t.Expr)
		}
	}
	return exprs, nil
}

// Evaluable is a dashboard expression as Prometheus evaluates it: every
// variable matching all its values, and $__rate_interval the given range.
func Evaluable(expr, rateInterval string) string {
	return strings.NewReplacer(`"$rule"`, `".*"`, `"$instance"`, `".*"`, "$__rate_interval", rateInterval).Replace(expr)
}

// RuleExprs are the expressions of a Prometheus rules file, by the name of
// the rule (the recorded series or the alert).
func RuleExprs(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Alert  string `yaml:"alert"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Record+r.Alert] = r.Expr
		}
	}
	return out, nil
}
