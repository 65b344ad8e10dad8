import sys

from course.cases.fairness.check import main

sys.exit(main())
