#!/usr/bin/env bash
# A profile longer than one call: bg.sh start NAME SEED BUDGET runs `do.sh profile` in the background
# (MODEL/PROMPT from the environment), bg.sh wait NAME SECONDS waits for it up to SECONDS, then copies
# what it wrote to $OUT (whether done or not) and says which.
set -u
R=/tmp/runs; mkdir -p $R
case "$1" in
start)
  mkdir -p $R/$2
  # setsid: the call's end kills its process group, and the profile must outlive the call
  TMO=1500 OUT=$R MODEL=${MODEL:-} PROMPT=${PROMPT:-} setsid bash -c "bash .real-vllm/tools/do.sh profile $2 $3 $4 > $R/$2.log 2>&1; echo done > $R/$2.done" < /dev/null > /dev/null 2>&1 &
  echo "started $2" ;;
wait)
  for i in $(seq "$3"); do [ -f $R/$2.done ] && break; sleep 1; done
  [ -f $R/$2.done ] && echo "$2 finished" || echo "$2 still running"
  mkdir -p $OUT/$2; cp -r $R/$2/. $OUT/$2/ 2>/dev/null; cp $R/$2.log $OUT/$2.log; tail -45 $R/$2.log ;;
esac
