"""For a stage that calls a service: an API key from the environment (`bearer_key`), a
message with any key in it masked (`scrub`), and no credential following a redirect."""

from plm_index.remote import NO_REDIRECTS as NO_REDIRECTS
from plm_index.remote import RedirectRefused as RedirectRefused
from plm_index.remote import bearer_key as bearer_key
from plm_index.remote import scrub as scrub
