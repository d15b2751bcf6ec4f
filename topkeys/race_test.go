//go:build race

package topkeys

// raceEnabled is true under the race detector, which makes the long tests
// slow and the allocation counts meaningless.
const raceEnabled = true
