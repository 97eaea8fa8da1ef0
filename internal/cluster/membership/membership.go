// Package membership is the feed of live kernel nodes the session side's
// node directory reads (docs/cluster.md, Membership): each node's
// address, incarnation and capacity, with joins and leaves as they happen.
//
// Without a feed (the default, join) kernel nodes say hello to one
// session side's directory, which watches each of them and so is the
// membership itself. Etcd is the feed for several session sides: each
// kernel node registers under a key prefix with a lease that ends when
// the node dies, and every session side watches the prefix.
//
// It is the runtime's own machinery: its exported names serve sibling
// packages and carry no compatibility promise.
package membership

import (
	"context"
	"errors"
	"fmt"
)

// Member is one live kernel node.
type Member struct {
	// Address is the host:port of the node's remote, where its
	// kernelhost actor is reached.
	Address string `json:"address"`
	// Incarnation is the node process's random id: a node restarted on
	// the same address is another member.
	Incarnation string `json:"incarnation"`
	// Capacity is how many kernels the node takes.
	Capacity int `json:"capacity"`
}

// Kind says what an Event reports.
type Kind int

const (
	// Joined: Member is now the live member at its address.
	Joined Kind = iota + 1
	// Updated: the member at Member.Address, same incarnation, now has
	// Member.Capacity.
	Updated
	// Left: Member is no longer a member. A node restarted on the same
	// address is reported Left (the old incarnation) then Joined.
	Left
	// Failed: the feed cannot reach its service (Err says why). It keeps
	// the members it knows, reports nothing until it recovers, and keeps
	// trying; a node lost meanwhile is still seen by the directory's own
	// watch on it.
	Failed
	// Recovered: the feed reaches its service again; the Joined and Left
	// events for what changed meanwhile came just before it.
	Recovered
)

func (k Kind) String() string {
	switch k {
	case Joined:
		return "joined"
	case Updated:
		return "updated"
	case Left:
		return "left"
	case Failed:
		return "failed"
	case Recovered:
		return "recovered"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is one change of the membership.
type Event struct {
	Kind   Kind
	Member Member // Joined, Updated, Left
	Err    error  // Failed
}

// Feed reports the live kernel nodes.
type Feed interface {
	// Watch reports every member live now as Joined, then each change,
	// until ctx ends; then the channel is closed. A consumer that stops
	// reading holds the feed up, never loses an event.
	Watch(ctx context.Context) (<-chan Event, error)
}

// Errors callers branch on.
var (
	// ErrConfig: the configuration cannot work; the error names the field.
	ErrConfig = errors.New("membership: bad configuration")
	// ErrMalformed: a record under the prefix is refused; the error says
	// what is wrong without quoting the record.
	ErrMalformed = errors.New("membership: malformed member record")
	// ErrUnavailable: the membership service did not answer in time or
	// refused the call.
	ErrUnavailable = errors.New("membership: service unavailable")
	// ErrClosed: the membership was closed.
	ErrClosed = errors.New("membership: closed")
)
