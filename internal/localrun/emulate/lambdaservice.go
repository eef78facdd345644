package emulate

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
)

// LambdaService serves the Lambda Invoke API
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html) for the functions of the run, so
// that the Step Functions server invokes them as Step Functions would.
type LambdaService struct {
	mu    sync.Mutex
	byKey map[string]*Function
}

// Add registers a function under its name and ARN.
func (s *LambdaService) Add(f *Function) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[string]*Function{}
	}
	s.byKey[f.Name] = f
	s.byKey[f.ARN] = f
}

// Lookup finds a function by name or ARN.
func (s *LambdaService) Lookup(nameOrARN string) *Function {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[nameOrARN]
}

func (s *LambdaService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix = "/2015-03-31/functions/"
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, prefix) || !strings.HasSuffix(r.URL.Path, "/invocations") {
		http.NotFound(w, r)
		return
	}
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, prefix), "/invocations")
	f := s.Lookup(name)
	if f == nil {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		http.Error(w, `{"message":"Function not found: `+name+`"}`, http.StatusNotFound)
		return
	}
	payload, _ := io.ReadAll(r.Body)
	if f.refuse() {
		writeThrottle(w, ReasonReservedConcurrency)
		return
	}
	res, err := f.Invoke(r.Context(), payload)
	if te := (*ThrottleError)(nil); errors.As(err, &te) {
		writeThrottle(w, te.Reason)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if res.ErrorType != "" {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(res.Payload)
}

// writeThrottle answers an Invoke with TooManyRequestsException as the Lambda API does: HTTP 429,
// X-Amzn-ErrorType, and a body with the throttle's Reason, Type and message
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html, "Errors":
// "TooManyRequestsException ... HTTP Status Code: 429"). The Step Functions server names it
// Lambda.TooManyRequestsException. Lambda's Retry-After header (the SDK's retryAfterSeconds) is
// left out: AWS documents no value for a concurrency throttle.
func writeThrottle(w http.ResponseWriter, reason string) {
	w.Header().Set("X-Amzn-ErrorType", "TooManyRequestsException")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	b, _ := json.Marshal(map[string]string{"Reason": reason, "Type": "User", "message": "Rate Exceeded."})
	w.Write(b)
}
