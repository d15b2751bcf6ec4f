// Package debpkg installs Debian packages that tests need (redis-server,
// chromium): the project sets itself up on a fresh machine, so a test that
// needs a program installs it rather than asking for it by hand.
package debpkg

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// mu serializes this process's installs; other processes (test binaries
// of other packages, run in parallel) wait on dpkg's own lock.
var mu sync.Mutex

// Install runs apt-get install -y for pkgs (through sudo -n when not
// root), waiting up to five minutes for another install to let go of
// dpkg's lock; if it fails, it updates the package lists and tries once
// more (a fresh machine has none). The error ends with apt-get's last
// lines.
func Install(pkgs ...string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("no apt-get here (not Debian or Ubuntu): install %s by hand", strings.Join(pkgs, " "))
	}
	mu.Lock()
	defer mu.Unlock()
	install := append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)
	if aptGet(install...) == nil {
		return nil
	}
	if err := aptGet("update"); err != nil {
		return err
	}
	return aptGet(install...)
}

// aptGet runs apt-get with args.
func aptGet(args ...string) error {
	args = append([]string{"apt-get", "-o", "DPkg::Lock::Timeout=300"}, args...)
	if os.Geteuid() != 0 {
		args = append([]string{"sudo", "-n"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.Join(lines[max(0, len(lines)-5):], "\n"))
	}
	return nil
}
