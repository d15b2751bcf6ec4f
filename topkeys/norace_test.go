//go:build !race

package topkeys

const raceEnabled = false
