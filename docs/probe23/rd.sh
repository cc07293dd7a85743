#!/bin/bash
# rd.sh FILE [args]: run FILE plainly on real torch-directml (realdml: torch 2.4.1 + torch-directml on lavapipe)
source ~/.cache/realdml/env.sh
exec nice -n 19 timeout 300 ~/.cache/dmlprof/venv-torch2.4.1/bin/python "$@"
