// The sign-in page: the form posts itself; this shows why the last attempt was refused
// (as text, never as HTML), and signs in with the credentials of a URL opened as
// http://user:pass@host/ (browsers send those only when challenged, and the dashboard
// does not challenge: it has this page instead). Chromium hides them from location.href;
// document.URL keeps them. The dashboard's own links and fetches are built from
// location.origin, so signing out lands here without them (no signing straight back in).
"use strict";
const refused = new URLSearchParams(location.search).get("error");
const form = document.getElementById("sign-in");
const opened = new URL(document.URL);
if (refused) {
  const error = document.getElementById("error");
  error.textContent = refused;
  error.hidden = false;
} else if (opened.username) {
  form.elements.username.value = decodeURIComponent(opened.username);
  form.elements.password.value = decodeURIComponent(opened.password);
  form.submit();
}
