"""Third-party management commands that change who may do what, recorded in the governance trail.

Django's ``changepassword`` and ``createsuperuser``, DRF's ``drf_create_token`` and django-axes' ``axes_reset*``
change accounts, API tokens and login lockouts as the admin's pages for the same rows do, but with no event. This
app comes before their apps in INSTALLED_APPS, so its same-named commands win: each is the original run inside
:func:`toolhub.governance_trail.governance_recording`, so its writes and their events commit together. It holds
no models, templates or static files, so its place in INSTALLED_APPS changes nothing else.
"""
