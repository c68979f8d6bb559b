from django import forms
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from core.throttle import login_blocked_for


class LoginForm(AuthenticationForm):
    """Django's login form, refusing without checking the password while the address, or the account from this
    address, is throttled."""

    throttled = False

    def clean(self):
        blocked = login_blocked_for(self.request, self.cleaned_data.get("username"))
        if blocked:
            self.throttled = True
            raise ValidationError(
                f"Too many failed logins. Try again in {max(1, blocked // 60)} minutes.", code="throttled"
            )
        return super().clean()


class FirstAccountForm(UserCreationForm):
    """The first account; with `setup_token`, the one-time token the server printed on its console is asked too."""

    email = forms.EmailField(required=False)
    setup_token = forms.CharField(
        label="Setup token",
        max_length=200,
        strip=True,
        help_text="Printed on the server's console (its log) when it started: this server may be reached from other "
        "machines, so only whoever runs it can claim it.",
    )

    class Meta:
        model = User
        fields = ("username", "email")

    def __init__(self, *args, setup_token: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        if not setup_token:
            del self.fields["setup_token"]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="my token")
