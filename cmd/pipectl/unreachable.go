package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
)

// unreachable says in one sentence that the endpoint cannot be reached, when err is the SDK's
// failure to talk to it at all (the local stack stopped, a wrong AWS_ENDPOINT_URL, no network):
// connection refused, no such host, connection reset, or the connection closed before an answer.
// The SDK's own error is a chain of operation, retry and transport errors that buries that.
func unreachable(err error) (string, bool) {
	var why string
	var dnsErr *net.DNSError
	var urlErr *url.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		why = "no such host"
	case errors.Is(err, syscall.ECONNRESET):
		why = "connection reset by peer"
	case errors.As(err, &urlErr) && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		// Only the transport's (net/http's *url.Error): a body that ends early is another matter.
		why = "connection closed before an answer"
	default:
		return "", false
	}
	endpoint := "the AWS endpoint"
	if errors.As(err, &urlErr) {
		if p, perr := url.Parse(urlErr.URL); perr == nil && p.Host != "" {
			endpoint = p.Scheme + "://" + p.Host
		}
	}
	return fmt.Sprintf("cannot reach %s (%s): check that the server there runs (for the local stack, make serve) "+
		"and that AWS_ENDPOINT_URL and the network point to it", endpoint, why), true
}
