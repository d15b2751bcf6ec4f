package gossip

import "time"

// maxJoinWait is the longest pause between join attempts.
const maxJoinWait = 10 * time.Second

// Join joins the cluster through the given seeds now, and returns how
// many it reached.
func (c *Cluster) Join(seeds ...string) (int, error) {
	c.joinAttempts.Add(1)
	n, err := c.ml.Join(seeds)
	if n == 0 {
		c.joinFailures.Add(1)
	}
	return n, err
}

// joinLoop joins the seeds, retrying with backoff until this node is in
// a cluster of more than itself; then, every rejoin interval while some
// member is dead, it tries to reconnect to the dead members and the seeds,
// so that the two sides of a long partition merge again once it heals.
func (c *Cluster) joinLoop(seeds []string) {
	defer c.wg.Done()
	wait := max(c.interval, 100*time.Millisecond)
	joined := len(seeds) == 0
	for {
		if !joined {
			n, err := c.Join(seeds...)
			if n > 0 && c.ml.NumMembers() > 1 {
				joined = true
			} else if err != nil {
				c.logger.Printf("[WARN] gossip: join %v: %v; retrying in %v", seeds, err, wait)
			}
		} else if dead := c.deadAddrs(); len(dead) > 0 {
			if _, err := c.Join(append(dead, seeds...)...); err != nil {
				c.logger.Printf("[DEBUG] gossip: rejoin %v: %v", dead, err)
			}
		}
		next := c.rejoin
		if !joined {
			next = wait
			wait = min(2*wait, maxJoinWait)
		}
		t := time.NewTimer(next)
		select {
		case <-c.done:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// deadAddrs returns the addresses of the members declared dead.
func (c *Cluster) deadAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.gone {
		if m.State == StateDead {
			out = append(out, m.Addr)
		}
	}
	return out
}
