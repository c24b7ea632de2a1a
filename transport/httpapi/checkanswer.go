package httpapi

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/admit-dev/admit/internal/jsonanswer"
	"github.com/admit-dev/admit/service"
)

// answerBufs are the bodies writeCheck encodes into, reused.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledAnswer is the largest body put back into answerBufs.
const maxPooledAnswer = 64 << 10

// writeCheck answers status with the CheckResponse of res: the bytes jsonanswer.Write gives
// NewCheckResponse(res), encoded without reflection when every policy name is plain ASCII
// (appendCheck), else by jsonanswer.Write itself.
func writeCheck(w http.ResponseWriter, status int, res service.Result) {
	bp := answerBufs.Get().(*[]byte)
	body, ok := appendCheck((*bp)[:0], res)
	if ok {
		jsonanswer.WriteEncoded(w, status, body)
	} else {
		writeJSON(w, status, NewCheckResponse(res))
	}
	if cap(body) <= maxPooledAnswer {
		*bp = body[:0]
		answerBufs.Put(bp)
	}
}

// appendCheck appends the JSON of NewCheckResponse(res) and a newline to buf, as encoding/json
// spells it; false if a policy name holds a byte encoding/json would escape.
func appendCheck(buf []byte, res service.Result) ([]byte, bool) {
	d := res.Decisions[res.Deciding]
	buf = strconv.AppendBool(append(buf, `{"allowed":`...), res.Allowed)
	buf, ok := appendPlain(append(buf, `,"policy":`...), d.Limit.Name)
	if !ok {
		return buf, false
	}
	buf = strconv.AppendInt(append(buf, `,"limit":`...), d.Limit.Capacity(), 10)
	buf = strconv.AppendInt(append(buf, `,"remaining":`...), d.Remaining, 10)
	buf = strconv.AppendInt(append(buf, `,"retry_after_ms":`...), d.RetryAfter.Milliseconds(), 10)
	buf = strconv.AppendInt(append(buf, `,"reset_after_ms":`...), d.ResetAfter.Milliseconds(), 10)
	buf = strconv.AppendBool(append(buf, `,"replayed":`...), res.Replayed)
	buf = strconv.AppendBool(append(buf, `,"degraded":`...), res.Degraded)
	buf = append(buf, `,"decisions":[`...)
	for i, d := range res.Decisions {
		if i > 0 {
			buf = append(buf, ',')
		}
		if buf, ok = appendPlain(append(buf, `{"policy":`...), d.Limit.Name); !ok {
			return buf, false
		}
		buf = strconv.AppendBool(append(buf, `,"allowed":`...), d.Allowed)
		if d.Limit.Shadow {
			buf = append(buf, `,"shadow":true`...)
		}
		if d.Degraded {
			buf = append(buf, `,"degraded":true`...)
		}
		buf = strconv.AppendInt(append(buf, `,"limit":`...), d.Limit.Capacity(), 10)
		buf = strconv.AppendInt(append(buf, `,"remaining":`...), d.Remaining, 10)
		buf = strconv.AppendInt(append(buf, `,"retry_after_ms":`...), d.RetryAfter.Milliseconds(), 10)
		buf = strconv.AppendInt(append(buf, `,"reset_after_ms":`...), d.ResetAfter.Milliseconds(), 10)
		buf = append(buf, '}')
	}
	return append(buf, "]}\n"...), true
}

// appendPlain appends s quoted, false if it holds a byte that encoding/json escapes (a control
// character, '"', '\\', '<', '>' or '&') or any byte outside ASCII.
func appendPlain(buf []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return buf, false
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"'), true
}
