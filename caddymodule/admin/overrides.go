package admin

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/limiter"
)

// The routes of a rule's per-key overrides:
//
//	GET    /rate_limit/rules/{rule}/overrides
//	PUT    /rate_limit/rules/{rule}/keys/{key}/override  {"factor": F, "expires_in": "24h"}
//	DELETE /rate_limit/rules/{rule}/keys/{key}/override

// maxOverrideBody bounds a PUT's body.
const maxOverrideBody = 4 << 10

// overrideView is an override as the API shows it.
type overrideView struct {
	Key     string  `json:"key"`
	Factor  float64 `json:"factor"`
	Expires string  `json:"expires,omitempty"` // RFC 3339, UTC; none: no end
	SetAt   string  `json:"set_at"`
	SetBy   string  `json:"set_by"`
}

// overridesView is a rule's overrides.
type overridesView struct {
	Rule         string         `json:"rule"`
	MaxOverrides int            `json:"max_overrides"`
	Overrides    []overrideView `json:"overrides"`
}

// viewOverride is o as the API shows it.
func viewOverride(o limiter.Override) overrideView {
	v := overrideView{Key: o.Key, Factor: o.Factor, SetAt: o.SetAt.UTC().Format(time.RFC3339), SetBy: o.SetBy}
	if !o.Expires.IsZero() {
		v.Expires = o.Expires.UTC().Format(time.RFC3339)
	}
	return v
}

// serveOverrides answers a rule's overrides in force, sorted by key.
func serveOverrides(w http.ResponseWriter, e caddymodule.RuleState) error {
	v := overridesView{Rule: e.Name(), MaxOverrides: e.MaxOverrides(), Overrides: []overrideView{}}
	for _, o := range e.Overrides() {
		v.Overrides = append(v.Overrides, viewOverride(o))
	}
	return writeJSON(w, v)
}

// overrideBody is a PUT's body.
type overrideBody struct {
	Factor    *float64 `json:"factor"`
	ExpiresIn string   `json:"expires_in"`
}

// serveOverride sets (PUT) or removes (DELETE) key's override.
func serveOverride(w http.ResponseWriter, r *http.Request, e caddymodule.RuleState, key string) error {
	if err := allowMethods(w, r, http.MethodPut, http.MethodDelete); err != nil {
		return err
	}
	if r.Method == http.MethodDelete {
		if !e.RemoveOverride(key, r.RemoteAddr) {
			return apiError(http.StatusNotFound, "rule %q has no override for key %q", e.Name(), key)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	var body overrideBody
	dec := json.NewDecoder(io.LimitReader(r.Body, maxOverrideBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return apiError(http.StatusBadRequest, "body: %v (want {\"factor\": F, \"expires_in\": \"24h\"})", err)
	}
	if dec.More() {
		return apiError(http.StatusBadRequest, "body: one JSON object only")
	}
	if body.Factor == nil {
		return apiError(http.StatusBadRequest, "body: factor is required (≥ 0; 0 refuses the key)")
	}
	if f := *body.Factor; !(f >= 0) || math.IsInf(f, 1) {
		return apiError(http.StatusBadRequest, "factor %v: must be a finite number ≥ 0 (0 refuses the key)", f)
	}
	var expiresIn time.Duration
	if body.ExpiresIn != "" {
		d, err := caddy.ParseDuration(body.ExpiresIn)
		if err != nil || d <= 0 {
			return apiError(http.StatusBadRequest, "expires_in %q: want a positive duration such as 30m, 24h or 7d", body.ExpiresIn)
		}
		expiresIn = d
	}
	o, err := e.SetOverride(key, *body.Factor, expiresIn, r.RemoteAddr)
	switch {
	case errors.Is(err, caddymodule.ErrOverridesFull):
		return apiError(http.StatusConflict, "rule %q: max_overrides reached (%d): remove one, or raise max_overrides", e.Name(), e.MaxOverrides())
	case err != nil:
		return apiError(http.StatusBadRequest, "%v", err)
	}
	return writeJSON(w, viewOverride(o))
}
