package gossip

import (
	"cmp"
	"math"
	"slices"
)

// NodeDemand is one node's recent demand for a key, in any unit shared by
// every NodeDemand of a call and by AllocOptions.Capacity (for example
// units per second).
type NodeDemand struct {
	Node   string
	Demand float64
}

// NodeShare is one node's share of a key's limit: a fraction of it.
type NodeShare struct {
	Node  string
	Share float64
}

// AllocOptions tunes Allocate. The zero value is usable.
type AllocOptions struct {
	// Capacity is the global limit in the unit of the demands. Zero or
	// less: the demands are only compared with each other, as if the total
	// demand were exactly the limit (pure proportional split).
	Capacity float64
	// Floor is the fraction of the limit set aside for floors, split
	// equally between the nodes: every node gets at least Floor/N, so that
	// a node whose demand starts from zero can admit at once and report.
	// Zero: DefaultFloor. It is capped at 1 (then every node gets 1/N).
	Floor float64
	// Headroom is how much more than its demand a light node gets, as a
	// fraction of its demand, so that it can grow until the next report.
	// Zero: DefaultHeadroom; negative: none.
	Headroom float64
}

// Defaults of AllocOptions.
const (
	DefaultFloor    = 0.02
	DefaultHeadroom = 0.10
)

// Allocate returns each node's share (fraction of L, summing to ≤ 1) of
// one key's limit, from the nodes' recent demand: the same result on every
// node given the same inputs, whatever their order. The result is sorted
// by node name (a name given twice is kept twice, sorted by demand).
//
// The algorithm is a proportional water-filling:
//
//  1. Demands that are negative or NaN count as 0; +Inf as a very large
//     demand. If no node asks anything, every node gets 1/N.
//  2. Every node gets the floor φ = Floor/N. The budget left is B = 1−Nφ.
//  3. A node's want is its demand plus Headroom, as a fraction of
//     Capacity. A node is light if its want fits in its proportional part
//     of B (B·d/ΣD); light nodes get their want and the heavy ones split the
//     rest in proportion to demand. Since both sides are linear in d, either
//     every node is light (the wants sum to at most B: underloaded) or none
//     is (overloaded: B is split exactly in proportion to demand).
//  4. Underloaded, what is left of B after the wants is split equally
//     between all the nodes (idle ones included): a buffer for growth.
//
// Guarantees: the shares sum to at most 1 (to 1 within float rounding when
// some node asks something); every node gets at least φ; equal demands get
// equal shares; no demand at all gives 1/N each; a single node asking at
// least Capacity/(1+Headroom) gets B+φ = 1−(N−1)φ; when the total demand
// is at least (1+Headroom)×Capacity no node is light and the split is
// exactly proportional above the floors, so every node asking something
// gets less than its demand and all of B is used: every node then admits
// the same fraction of what it is asked, so a request's chance does not
// depend on the node it reaches (a "light if below an equal split" rule
// would instead make a node's share fall when its demand crosses the equal
// split, and waste the light nodes' headroom). A node's share does not
// decrease when its own demand grows and the others' do not change.
func Allocate(demands []NodeDemand, opts AllocOptions) []NodeShare {
	sorted := slices.Clone(demands)
	slices.SortFunc(sorted, func(a, b NodeDemand) int {
		if c := cmp.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return cmp.Compare(clean(a.Demand, len(sorted)), clean(b.Demand, len(sorted)))
	})
	return allocateSorted(sorted, opts, make([]NodeShare, len(sorted)))
}

// clean is a demand as Allocate counts it: negative and NaN are 0, and
// sums of n demands cannot overflow.
func clean(d float64, n int) float64 {
	if !(d > 0) { // negative, zero, NaN
		return 0
	}
	return min(d, math.MaxFloat64/float64(4*n))
}

// allocateSorted is Allocate on demands sorted by node, into out (of the
// same length): the sums run in that order, so that every node computes
// the same shares to the last bit.
func allocateSorted(nodes []NodeDemand, opts AllocOptions, out []NodeShare) []NodeShare {
	n := len(nodes)
	if n == 0 {
		return nil
	}
	total := 0.0
	for _, x := range nodes {
		total += clean(x.Demand, n)
	}
	if total == 0 {
		for i, x := range nodes {
			out[i] = NodeShare{x.Node, 1 / float64(n)}
		}
		return out
	}
	floorTotal := opts.Floor
	if floorTotal == 0 {
		floorTotal = DefaultFloor
	}
	floorTotal = min(max(floorTotal, 0), 1)
	phi := floorTotal / float64(n)
	headroom := opts.Headroom
	if headroom == 0 {
		headroom = DefaultHeadroom
	}
	headroom = max(headroom, 0)
	capacity := opts.Capacity
	if !(capacity > 0) {
		capacity = total
	}
	budget := 1 - floorTotal
	extra := 0.0
	under := total/capacity*(1+headroom) <= budget
	if under {
		extra = (budget - total/capacity*(1+headroom)) / float64(n)
	}
	sum := 0.0
	for i, x := range nodes {
		d, share := clean(x.Demand, n), 0.0
		if under {
			share = d / capacity * (1 + headroom)
		} else { // overloaded: in proportion to demand
			share = budget * (d / total)
		}
		out[i] = NodeShare{x.Node, phi + share + extra}
		sum += out[i].Share
	}
	for sum > 1 { // float rounding: shave until the sum fits
		f := (1 - 2e-16*float64(n)) / sum
		sum = 0
		for i := range out {
			out[i].Share *= f
			sum += out[i].Share
		}
	}
	return out
}
