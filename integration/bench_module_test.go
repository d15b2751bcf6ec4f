package integration

import (
	"os/exec"
	"testing"
)

// TestBenchModule keeps the benchmark module (integration/bench, a module
// of its own so that the peers are its dependencies only) building and its
// own tests passing: the adapters that put every peer behind one interface
// are real limiters, the exact log is exact, the report is written where it
// belongs. The benchmarks themselves run with `go run ./cmd/bench`.
func TestBenchModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the benchmark module and its peers")
	}
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = "bench"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v in integration/bench: %v\n%s", args, err, out)
		}
	}
}
