package jwtkey

import (
	"errors"
	"fmt"
)

// The errors Verify returns wrap exactly one of these, so that errors.Is and
// [Reason] can tell why a token was refused.
var (
	ErrTooLarge    = errors.New("token too large")
	ErrMalformed   = errors.New("malformed token")
	ErrAlgorithm   = errors.New("algorithm not allowed")
	ErrUnknownKey  = errors.New("no key for token")
	ErrSignature   = errors.New("invalid signature")
	ErrExpired     = errors.New("token expired")
	ErrNotYetValid = errors.New("token not valid yet")
	ErrIssuer      = errors.New("wrong issuer")
	ErrAudience    = errors.New("wrong audience")
)

// reasons maps each error above to its label, a fixed set fit for a metric.
var reasons = [...]struct {
	err   error
	label string
}{
	{ErrTooLarge, "too_large"},
	{ErrMalformed, "malformed"},
	{ErrAlgorithm, "algorithm"},
	{ErrUnknownKey, "unknown_key"},
	{ErrSignature, "signature"},
	{ErrExpired, "expired"},
	{ErrNotYetValid, "not_yet_valid"},
	{ErrIssuer, "issuer"},
	{ErrAudience, "audience"},
}

// Reasons returns every label Reason gives an error from Verify, and
// "other" last: the values of a metric label counting failures.
func Reasons() []string {
	out := make([]string, 0, len(reasons)+1)
	for _, r := range reasons {
		out = append(out, r.label)
	}
	return append(out, "other")
}

// Reason returns a short label for an error returned by [Verifier.Verify],
// fit for a metric label: one of "too_large", "malformed", "algorithm",
// "unknown_key", "signature", "expired", "not_yet_valid", "issuer",
// "audience". It returns "" for nil and "other" for an error that did not
// come from Verify.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "other"
}

// refuse returns an error wrapping reason, with details.
func refuse(reason error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", reason, fmt.Sprintf(format, args...))
}
