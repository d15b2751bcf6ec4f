//go:build race

package sim

// raceEnabled is true under the race detector: the scenarios run shorter.
const raceEnabled = true
