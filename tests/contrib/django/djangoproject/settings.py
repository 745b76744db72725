"""Settings of the test project: ``DATABASES["default"]`` comes from the environment.

``JL_DJANGO_DATABASE`` holds the JSON of the ``default`` entry of ``DATABASES``;
``JL_DJANGO_ALIAS`` overrides ``JOBLOCKS_DATABASE`` and ``JL_DJANGO_CONFIGURE=0`` sets
``JOBLOCKS_CONFIGURE = False``.
"""

from __future__ import annotations

import json
import os

SECRET_KEY = "joblocks-tests-only"  # noqa: S105 - a test project
DEBUG = False
USE_TZ = True
INSTALLED_APPS = [
    "joblocks.contrib.django",
    "tests.contrib.django.djangoproject.jobsapp",
]
DATABASES = {"default": json.loads(os.environ["JL_DJANGO_DATABASE"])}
JOBLOCKS_DATABASE = os.environ.get("JL_DJANGO_ALIAS", "default")
JOBLOCKS_CONFIGURE = os.environ.get("JL_DJANGO_CONFIGURE", "1") == "1"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
