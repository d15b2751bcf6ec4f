//go:build race

package limiter

// raceEnabled is true under the race detector, which makes the memory
// tests too slow and their heap figures meaningless.
const raceEnabled = true
