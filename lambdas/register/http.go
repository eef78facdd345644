package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DefaultHTTPTimeout bounds one POST to the core system when HTTP_TIMEOUT_SECONDS is unset.
const DefaultHTTPTimeout = 10 * time.Second

func httpTimeout(v string) (time.Duration, error) {
	if v == "" {
		return DefaultHTTPTimeout, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 300 {
		return 0, fmt.Errorf("HTTP_TIMEOUT_SECONDS %q must be a whole number of seconds from 1 to 300", v)
	}
	return time.Duration(n) * time.Second, nil
}

// newHTTPClient builds the one client an execution environment reuses across invocations, so the
// records of a chunk, and of the next chunks, share one keep-alive connection.
//
// A connection kept idle while Lambda freezes the environment may be dead on thaw. net/http
// resends a request that failed on a reused connection before any response only when the request
// is idempotent, and it treats a request with an Idempotency-Key header as such, provided the body
// can be replayed (GetBody, which http.NewRequest sets for a bytes.Reader).
// https://pkg.go.dev/net/http#Transport
func newHTTPClient(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Timeout: timeout,
		// Never follow a redirect: for a 301, 302 or 303 net/http would resend the POST as a GET
		// without a body, and a 2xx answer to that GET would count as "registered"
		// (https://pkg.go.dev/net/http#Client: "If CheckRedirect returns ErrUseLastResponse, then the
		// most recent response is returned with its body unclosed"). classify makes every 3xx a
		// PermanentError.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          4,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       60 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: timeout,
			ExpectContinueTimeout: time.Second,
		},
	}
}
