// The sign-in page: the form posts itself; this shows why the last attempt was refused
// (as text, never as HTML), and signs in with the credentials of a URL opened as
// http://user:pass@host/ (browsers send those only when challenged, and the dashboard
// does not challenge: it has this page instead).
"use strict";
const refused = new URLSearchParams(location.search).get("error");
const form = document.getElementById("sign-in");
if (refused) {
  const error = document.getElementById("error");
  error.textContent = refused;
  error.hidden = false;
} else if (location.username) {
  form.elements.username.value = decodeURIComponent(location.username);
  form.elements.password.value = decodeURIComponent(location.password);
  form.submit();
}
