#!/bin/bash
# make gradescope-docker runs this inside the container: Gradescope's layout, setup once,
# then each submission in turn (course/grading/gradescope_docker.py).
set -u
mkdir -p /autograder
# A lent interpreter under /root (pyenv's): the sandbox's uid must reach it (search only).
case "${CS336_GRADER_PYTHON:-}" in /root/*) chmod o+x /root ;; esac
cp -r /work-in/source /autograder/source
bash /autograder/source/setup.sh > /work-out/setup.log 2>&1 || { echo "setup.sh failed"; tail -30 /work-out/setup.log; exit 1; }
tail -1 /work-out/setup.log
cp /autograder/source/run_autograder /autograder/run_autograder
for submission in /work-in/submissions/*; do
    rm -rf /autograder/submission /autograder/results
    cp -r "$submission" /autograder/submission
    rm -f /autograder/submission_metadata.json
    metadata="/work-in/metadata/$(basename "$submission").json"
    if [ -f "$metadata" ]; then cp "$metadata" /autograder/submission_metadata.json; fi
    bash /autograder/run_autograder > "/work-out/$(basename "$submission").log" 2>&1
    cp /autograder/results/results.json "/work-out/$(basename "$submission").json"
done
