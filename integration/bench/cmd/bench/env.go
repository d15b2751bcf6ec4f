package main

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// environment is what the figures were measured on.
type environment struct {
	Date   string
	CPU    string
	Cores  int
	Kernel string
	Go     string
	Caddy  string
	Wrk    string
	Quick  bool
}

func readEnvironment() environment {
	env := environment{
		Date:  time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Cores: runtime.NumCPU(),
		Go:    strings.TrimSpace(output("go", "version")),
		Caddy: strings.TrimSpace(output("go", "list", "-m", "-f", "{{.Version}}", "github.com/caddyserver/caddy/v2")),
		Wrk:   wrkVersion(),
	}
	env.Kernel = strings.TrimSpace(output("uname", "-sr"))
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				env.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	return env
}

// output is cmd's standard output, "" on failure.
func output(name string, args ...string) string {
	out, _ := exec.Command(name, args...).Output()
	return string(out)
}
