package admit

import "time"

// An Override sets one subject's numbers under one policy in place of the policy's (and its
// tier's), on every process sharing the Store, until it is deleted or expires (docs/operations.md,
// "Raise one tenant's limit"). A Store keeps it at Key, which [KeyBuilder.OverrideKey] makes: the
// key's hash slot is the subject's state's, so a Store decides a Request whose OverrideKey is Key
// under the Override's numbers in the same call that reads the state — Redis reads it in the same
// script.
//
// An Override changes numbers only, never the shape of a state (the algorithm, the window): the
// Limit that decides is the Request's with Rate, and for GCRA Burst, replaced. The counters stay
// the subject's own under the new numbers, as they do when a configuration changes a rate. A GCRA
// bucket, whose state is a time meaningful at one emission interval, is read under the new numbers
// with its backlog cut to what they allow: a bucket the old numbers left fuller than the new ones
// can hold is full, not corrupt (docs/gcra.md).
type Override struct {
	// Key is where the Override is stored: the KeyBuilder.OverrideKey of the policy and subject.
	Key string
	// Rate replaces the Limit's Rate: 1 to the largest Rate a Limit takes.
	Rate int64
	// Burst replaces a GCRA Limit's Burst, up to the largest Rate; 0 keeps the Limit's. Under any
	// other algorithm it is not used.
	Burst int64
	// Expires is when the Override vanishes by itself; the zero Time for never.
	Expires time.Time
	// Reason is free text for the audit log and for inspection: at most 200 bytes.
	Reason string
}
