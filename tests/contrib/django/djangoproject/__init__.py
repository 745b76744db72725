"""A minimal Django project for the tests of joblocks.contrib.django."""
