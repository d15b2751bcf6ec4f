package caddymodule

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The problem types of draft-ietf-httpapi-ratelimit-headers: a quota
// exceeded (429), and a server that cannot decide for now (503, the rule's
// store is down under on_store_error fail_closed).
const (
	quotaExceeded            = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	temporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// problem is an RFC 9457 problem details body for a denied request.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// writeProblem answers a denial with application/problem+json.
func writeProblem(w http.ResponseWriter, policies []string, retryAfter int64) error {
	return writeProblemBody(w, problem{
		Type:             quotaExceeded,
		Title:            "Request cannot be satisfied as assigned quota has been exceeded",
		Status:           http.StatusTooManyRequests,
		Detail:           "Retry in " + strconv.FormatInt(retryAfter, 10) + " seconds.",
		ViolatedPolicies: policies,
	})
}

// writeUnavailable answers a request that a rule could not decide
// (on_store_error fail_closed) with a temporary-reduced-capacity problem.
func writeUnavailable(w http.ResponseWriter, retryAfter int64) error {
	return writeProblemBody(w, problem{
		Type:   temporaryReducedCapacity,
		Title:  "Request cannot be satisfied due to temporary reduced capacity",
		Status: http.StatusServiceUnavailable,
		Detail: "Retry in " + strconv.FormatInt(retryAfter, 10) + " seconds.",
	})
}

// writeProblemBody writes p as application/problem+json, with p's status.
func writeProblemBody(w http.ResponseWriter, p problem) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, err = w.Write(body)
	return err
}
