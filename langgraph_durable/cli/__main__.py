"""`python -m langgraph_durable.cli`: the same CLI as the `langgraph-durable` command."""

import sys

from langgraph_durable.cli import main

sys.exit(main())
