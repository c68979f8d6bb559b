"""`manage.py run_worker`: a run-queue worker process (scale-out; set RUNS_IN_WORKER=true on every process)."""

import signal
import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from agents_ide.gc_tuning import settle
from core.engine import tokens
from core.llm import client as llm
from core.runs import queue


class Command(BaseCommand):
    help = "Execute queued agent runs (django-tasks database queue) with a pool of threads."

    def add_arguments(self, parser):
        parser.add_argument("--threads", type=int, default=None, help="runs executed at once (RUN_WORKER_THREADS)")
        parser.add_argument("--poll", type=float, default=None, help="seconds between queue polls (RUN_POLL_S)")

    def handle(self, *args, threads=None, poll=None, **options):

        # A stopped worker's runs are not abandoned silently: their leases lapse and a reaper fails them.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        n = threads or settings.RUN_WORKER_THREADS

        # litellm takes seconds to import (the providers our own client does not serve need it), the model client's
        # TLS context a tenth of a second, a tokenizer most of a second to load (every compile counts with it): pay
        # them before taking the first run, as the server does at start.
        llm.warm_up()
        tokens.warm_up()

        settle()
        self.stdout.write(f"run worker {queue.WORKER_ID}: {n} threads", ending="\n")
        self.stdout.flush()
        queue.pool_serve_forever(threads=n, poll_s=poll or settings.RUN_POLL_S)
