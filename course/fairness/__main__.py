import sys

from course.fairness.check import main

sys.exit(main())
