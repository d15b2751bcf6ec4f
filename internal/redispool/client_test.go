package redispool

import (
	"context"
	"strings"
	"testing"
)

// A reload with the same redis block keeps the client; the last release
// closes it.
func TestClientPool(t *testing.T) {
	s := Settings{Addrs: []string{"127.0.0.1:1"}, Print: "pool-test"}
	a := Acquire(s)
	b := Acquire(s)
	if a != b {
		t.Fatal("same settings, two clients")
	}
	Release(a)
	if err := b.Redis.Ping(context.Background()).Err(); err != nil && strings.Contains(err.Error(), "closed") {
		t.Fatal("client closed while in use")
	}
	Release(b)
	if err := b.Redis.Ping(context.Background()).Err(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after the last release: %v, want a closed client", err)
	}
}
