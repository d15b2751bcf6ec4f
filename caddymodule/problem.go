package caddymodule

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// quotaExceeded is the problem type of draft-ietf-httpapi-ratelimit-headers.
const quotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// problem is an RFC 9457 problem details body for a denied request.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// writeProblem answers a denial with application/problem+json.
func writeProblem(w http.ResponseWriter, policies []string, retryAfter int64) error {
	body, err := json.Marshal(problem{
		Type:             quotaExceeded,
		Title:            "Request cannot be satisfied as assigned quota has been exceeded",
		Status:           http.StatusTooManyRequests,
		Detail:           "Retry in " + strconv.FormatInt(retryAfter, 10) + " seconds.",
		ViolatedPolicies: policies,
	})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusTooManyRequests)
	_, err = w.Write(body)
	return err
}
