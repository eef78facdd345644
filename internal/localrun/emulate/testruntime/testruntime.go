// Package testruntime is the Lambda function the tests of the local run invoke: their own test
// binary, started by the emulated Lambda runtime with LOCALRUN_TEST_RUNTIME=1, doing what each
// event says.
package testruntime

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"time"
)

// ServeIfAsked makes a test binary a Lambda function process when LOCALRUN_TEST_RUNTIME=1 (the
// tests start their own binary as a function with it; call it from init): it talks the Runtime API and does what each event says: {"do": "answer" | "exit" | "sleep" | "pause"
// | "hold" | "fail" | "first-receive"}; an SQS event does what its first message's body says
// ("first-receive" fails a message that SQS delivers for the second time).
func ServeIfAsked() {
	if os.Getenv("LOCALRUN_TEST_RUNTIME") != "1" {
		return
	}
	api := "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/invocation/"
	for {
		resp, err := http.Get(api + "next")
		if err != nil {
			os.Exit(1)
		}
		id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
		var ev struct {
			Do      string
			Records []struct {
				Body       string
				Attributes map[string]string
			}
		}
		json.NewDecoder(resp.Body).Decode(&ev)
		resp.Body.Close()
		if ev.Do == "" && len(ev.Records) > 0 { // an SQS event: the first message's body says
			json.Unmarshal([]byte(ev.Records[0].Body), &ev)
		}
		if ev.Do == "first-receive" && ev.Records[0].Attributes["ApproximateReceiveCount"] != "1" {
			ev.Do = "fail"
		}
		switch ev.Do {
		case "exit":
			os.Exit(2)
		case "sleep":
			time.Sleep(time.Minute)
		case "pause":
			time.Sleep(100 * time.Millisecond)
		case "hold":
			time.Sleep(400 * time.Millisecond)
		case "fail":
			http.Post(api+id+"/error", "application/json", strings.NewReader(`{"errorType":"TestError","errorMessage":"failed on purpose"}`))
			continue
		}
		http.Post(api+id+"/response", "application/json", strings.NewReader(`{"ok":true}`))
	}
}
